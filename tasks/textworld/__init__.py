"""TextWorldExpress CookingWorld as a Gymnasium env, SFT on gold paths and PPO with a value head (in progress)."""
