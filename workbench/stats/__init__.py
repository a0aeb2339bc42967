"""Sample statistics shared by the tune loop's drift check and the regression gate (the
decision rule: a rank test and the run's own noise)."""
