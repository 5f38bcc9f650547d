"""Verbal uncertainty (VOCAL): the human marker corpus, marker extraction from model outputs, and
the fit of a model's own marker-to-probability profile."""
