"""Learning suite: what the algorithms reach within a budget, and the calibration against published runs."""
