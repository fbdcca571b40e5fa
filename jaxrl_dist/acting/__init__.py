"""Acting: actor threads that step environments, the policy clients they ask for actions (local
inference or a central inference server), the published params, and their supervision."""
