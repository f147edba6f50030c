"""GLUE fine-tuning of the encoders: tasks, features, the training loop, its report and command."""

from structpe.exports import lazy_exports

# each module -> the public names it defines, imported when first asked for
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "finetune": ("finetune_glue", "finetune_task"),
})
