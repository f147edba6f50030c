"""GLUE fine-tuning of the encoders: tasks, features, the training loop, its report and command."""

from structpe.exports import lazy_exports

_WHERE = {  # public name -> the module that defines it
    "finetune_glue": "finetune",
    "finetune_task": "finetune",
}
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
