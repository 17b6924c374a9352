"""offline_gitd.learners."""
