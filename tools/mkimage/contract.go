package main

import "time"

// The image's contract: what deploy/Dockerfile declares for its final stage
// and what the ECS task definitions rely on (deploy/image_test.go fails when
// the two disagree). distroless/static:nonroot, the Dockerfile's base, gives
// the user, the working directory and the environment; they are written out
// here because this image has no base.
const (
	binaryPath = "/archiver"
	// engineBinaryPath is the engine alone (cmd/archiver-engine): what a
	// compose file or a CI service runs as its local DynamoDB, at about a
	// third of `archiver engine`'s idle memory.
	engineBinaryPath = "/archiver-engine"
	// imageUser is numeric, as in the task definitions: a runtime can check
	// that it is not root without reading /etc/passwd.
	imageUser  = "65532:65532"
	userID     = 65532
	userName   = "nonroot"
	homeDir    = "/home/nonroot"
	caBundle   = "/etc/ssl/certs/ca-certificates.crt"
	metricPort = "9090/tcp" // /metrics, /healthz, /readyz (--metrics-addr)
)

var (
	entrypoint = []string{binaryPath}
	command    = []string{"run"}
	environ    = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"SSL_CERT_FILE=" + caBundle,
	}
)

// healthcheck is Docker's HEALTHCHECK in the image configuration (not part
// of the OCI specification; Docker and Podman read it, ECS takes its own
// from the task definition). The durations are in nanoseconds, as Docker
// writes them.
type healthcheck struct {
	Test        []string      `json:"Test"`
	Interval    time.Duration `json:"Interval"`
	Timeout     time.Duration `json:"Timeout"`
	StartPeriod time.Duration `json:"StartPeriod"`
	Retries     int           `json:"Retries"`
}

// health is the Dockerfile's HEALTHCHECK: the image has no curl, so the
// binary asks its own /readyz.
var health = healthcheck{
	Test:        []string{"CMD", binaryPath, "health", "--quiet"},
	Interval:    30 * time.Second,
	Timeout:     5 * time.Second,
	StartPeriod: 30 * time.Second,
	Retries:     3,
}

// passwd and group hold root, nobody and the image's user, as distroless
// does; none has a shell or a password.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
	// nsswitch makes Go's resolver read /etc/hosts before DNS, as glibc
	// does (the runtime mounts /etc/hosts and /etc/resolv.conf).
	nsswitch = "hosts: files dns\n"
)
