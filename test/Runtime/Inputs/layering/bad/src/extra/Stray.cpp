// In a folder layers.txt does not name.
