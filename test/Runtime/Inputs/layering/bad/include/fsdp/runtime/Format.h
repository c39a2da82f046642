// The plan format (layer "format").
