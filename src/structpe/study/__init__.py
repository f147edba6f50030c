"""Replication studies: a YAML spec of recipes x seeds x evaluations (``spec``), its data stage
(``data``), run resumably cell by cell (``runner``, ``cells``), aggregated into mean ± sd and paired
t-tests with Holm-adjusted verdicts per paper claim (``aggregate``, ``report``); ``structpe study``
(``commands``)."""
