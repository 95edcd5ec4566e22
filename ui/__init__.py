"""What the pages share: sidebar controls, the cached engine call, pure figure and table builders."""
