"""The compute-plane worker: runs next to a cluster and dials out to the control plane."""
