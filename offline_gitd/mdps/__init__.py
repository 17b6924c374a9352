"""offline_gitd.mdps."""
