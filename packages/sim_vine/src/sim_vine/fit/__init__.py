"""Vine parameters from recordings (shooting fit, joint estimation, start poses, the
``vine_video`` source, synthetic videos); a wing: imports the physics and :mod:`sim_vine.vision`,
never the other way."""
