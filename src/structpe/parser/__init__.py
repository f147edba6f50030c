"""Dependency parsers that produce hexatags: the ``Parser`` interface, spaCy, and structpe's own
hexatagger (model, training, evaluation, the shipped default); ``structpe tag`` and ``structpe parser``."""
