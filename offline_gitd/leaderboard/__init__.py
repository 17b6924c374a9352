"""offline_gitd.leaderboard."""
