// Package benchkit is the machinery the sections of cmd/bench share:
// paired rounds and their statistics (median, spread, ratios), CPU and
// memory readings of this process and of child processes from /proc,
// the printing of figures, and the parts a section starts (the archiver
// binary, nats-server, versitygw, AWS clients). It measures nothing by
// itself; what a figure means is in the section that prints it.
package benchkit
