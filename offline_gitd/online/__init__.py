"""offline_gitd.online."""
