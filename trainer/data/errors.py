"""The data layer's typed error: bad paths, corrupt archives or images, inconsistent class lists."""


class DataError(ValueError):
    """Input data is missing, corrupt or inconsistent. The message names the file."""
