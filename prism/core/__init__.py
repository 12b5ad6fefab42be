"""The ground floor: records, names and file habits every stage shares (no torch)."""
