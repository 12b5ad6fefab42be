"""The machine a process runs on: host tuning, device choice, measured peaks."""
