"""The run: the trainer loop and what surrounds it (counters, saving, resume, evaluation, hooks,
hyperparameter control, logs and the summary)."""
