"""offline_gitd.envs."""
