"""The checkpoint format and its readers: what a run writes to disk and how anything reads it back.

`store.py` (the Orbax wrapper a run saves through), `packing.py` and `orbax_items.py` (how a step's
bytes are laid out), `integrity.py` (is a step whole), `steps.py` (which step "latest" or "best"
names), `trees.py` (tree helpers the readers share) and `policy.py` (`load_policy`: a saved policy
rebuilt from its description). Below the run shell: the shell, the engines and the tools import
it; it imports none of them.
"""
