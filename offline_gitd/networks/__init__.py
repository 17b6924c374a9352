"""offline_gitd.networks."""
