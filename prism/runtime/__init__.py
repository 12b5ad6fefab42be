"""The machine a process runs on: host tuning, device choice, measured peaks."""

# The devices a run may name: auto (cuda, then xpu, then cpu) or one of the kinds prism.parallel has a
# backend for. Here, free of torch, so the options that offer them import nothing heavy.
DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda", "xpu")
