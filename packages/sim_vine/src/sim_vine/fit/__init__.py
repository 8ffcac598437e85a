"""Vine parameters from recordings: the shooting fit, the joint (collocation) estimation,
start poses, the ``vine_video`` recording source and synthetic videos with known truth.

A wing of sim_vine: it imports the physics at the package root and :mod:`sim_vine.vision`,
never the other way.
"""
