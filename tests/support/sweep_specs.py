"""The tiny runs the sweep tests schedule: CartPole DQN, two seeds in one vmapped program, a
checkpoint every 400 steps, so that a run is seconds and can be caught between checkpoints."""

TINY_CARTPOLE_DQN = """
env = "CartPole-v1"
loop = "python"
seeds = "0-1"
mlp_hidden = "16,16"
batch_size = 16
initial_samples = 100
log_every = 200
checkpoint_every = 400
"""
