"""Scientific reasoning evaluation (SciReas / KRUX): generated science problems with their
knowledge ingredients, and scoring of multiple-choice and numeric answers with units."""
