"""GLUE fine-tuning of the encoders: tasks, features, the training loop, its report and command."""
