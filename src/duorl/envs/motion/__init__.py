"""Reference motion clips for whole-body tracking: the `.npz` clip format, and a synthetic clip."""
