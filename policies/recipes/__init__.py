"""Training recipes: data builders and optimizers (SxS, ...).

Importing this package stays light; each recipe lives in its own module.
"""
