# DlopInstall.cmake — install rules for the author kit: the find_package(dlop) package and the
# pkg-config file. (being written)
