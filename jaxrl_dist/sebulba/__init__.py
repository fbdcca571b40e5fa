"""The Sebulba engine (`engine.py`): EnvPool actor threads, the data seam, the learner on its
mesh and params publishing; its EnvPool evaluators (`evaluation.py`, `xla_evaluation.py`),
GIFs (`videos.py`), log window (`log_window.py`) and what a resume takes back (`resume.py`)."""
