"""``structpe quickstart``: the study harness's ``quickstart`` profile at one seed, and its short report."""
