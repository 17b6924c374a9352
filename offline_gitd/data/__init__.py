"""offline_gitd.data."""
