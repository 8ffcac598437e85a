"""The vine seen on video: reading frames, segmenting the vine, its keypoints in metres.

A wing of sim_vine: it imports the physics at the package root, never the other way.
"""
