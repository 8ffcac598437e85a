"""The vine on video (frames, segmentation, keypoints); a wing: imports the physics, never
the other way."""
