"""Replication studies: a YAML spec of recipes x seeds x evaluations (``spec``, checked by
``spec_checks``, its ``claims``, the cells a run selects: ``selection``), its data stage (``data``),
run resumably cell by cell (``runner``, ``cells``), each evaluation one module of ``stages``
(``ppl``, ``blimp``, ``syntaxgym``, ``leakage``, ``glue``: spec section, cache keys, run, flat scores,
report section; docs/studies/README.md says how to add one), aggregated into mean ± sd and paired
t-tests with Holm-adjusted verdicts per paper claim (``cell_metrics``, ``aggregate``, ``wording``,
``tables``, ``report``); across profiles (``scaling``, ``scaling_page``), methods side by side
(``methods``), size sweeps (``sweep``); ``structpe study`` (``commands``)."""
