"""offline_gitd.critics."""
