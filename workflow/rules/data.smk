# Data stage: shipped inputs -> tidy Parquet artifacts and the first maps.


def data_figures():
    return []
