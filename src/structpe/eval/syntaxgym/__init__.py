"""SyntaxGym: suites, their prediction formulas, and the scoring protocol (docs/evaluation.md)."""
