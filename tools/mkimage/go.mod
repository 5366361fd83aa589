module github.com/ttl-archiver/archiver/tools/mkimage

go 1.26.8
