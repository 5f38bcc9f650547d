"""Metrics and benchmark runners (coverage/AUC and the measures of each environment)."""
