package deploy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// imageContract is what a container image promises its runtime: the parts
// of the image configuration that the Dockerfile's final stage sets and
// that `make image` (tools/mkimage) writes.
type imageContract struct {
	Entrypoint   []string
	Cmd          []string
	User         string
	WorkingDir   string
	Env          map[string]string
	ExposedPorts []string // PORT/PROTO, sorted
	Healthcheck  healthcheck
}

// healthcheck is Docker's HEALTHCHECK, as the image configuration holds it
// (durations in nanoseconds).
type healthcheck struct {
	Test        []string
	Interval    time.Duration
	Timeout     time.Duration
	StartPeriod time.Duration
	Retries     int
}

// finalStage returns the instructions of a Dockerfile's last stage (after
// its last FROM), each as keyword (upper case) and arguments, with comments
// dropped and continued lines joined.
func finalStage(src string) ([][2]string, error) {
	var out [][2]string
	var cont strings.Builder
	for i, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		if cont.Len() == 0 && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if s, ok := strings.CutSuffix(t, `\`); ok {
			cont.WriteString(s + " ")
			continue
		}
		cont.WriteString(t)
		kw, args, _ := strings.Cut(strings.TrimSpace(cont.String()), " ")
		cont.Reset()
		kw = strings.ToUpper(kw)
		if kw == "FROM" {
			out = nil
			continue
		}
		if kw == "" {
			return nil, fmt.Errorf("line %d: no instruction", i+1)
		}
		out = append(out, [2]string{kw, strings.TrimSpace(args)})
	}
	if cont.Len() > 0 {
		return nil, fmt.Errorf("the last line ends with a continuation")
	}
	return out, nil
}

// dockerfileContract reads the image contract from a Dockerfile. Only the
// exec (JSON) form of ENTRYPOINT, CMD and HEALTHCHECK CMD is accepted: the
// image has no shell to run the shell form.
func dockerfileContract(src string) (imageContract, error) {
	instrs, err := finalStage(src)
	if err != nil {
		return imageContract{}, err
	}
	c := imageContract{Env: map[string]string{}}
	for _, in := range instrs {
		kw, args := in[0], in[1]
		switch kw {
		case "ENTRYPOINT", "CMD":
			var argv []string
			if err := json.Unmarshal([]byte(args), &argv); err != nil {
				return c, fmt.Errorf("%s %s: not the exec form [\"...\"]: %w", kw, args, err)
			}
			if kw == "CMD" {
				c.Cmd = argv
			} else {
				c.Entrypoint = argv
			}
		case "USER":
			c.User = args
		case "WORKDIR":
			c.WorkingDir = args
		case "ENV":
			if err := parseEnv(args, c.Env); err != nil {
				return c, err
			}
		case "EXPOSE":
			for _, p := range strings.Fields(args) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				c.ExposedPorts = append(c.ExposedPorts, p)
			}
			slices.Sort(c.ExposedPorts)
		case "HEALTHCHECK":
			if c.Healthcheck, err = parseHealthcheck(args); err != nil {
				return c, err
			}
		}
	}
	return c, nil
}

// dockerfileBinaries returns where the final stage copies files from the
// build stage (COPY --from=build SRC DEST: each DEST), sorted.
func dockerfileBinaries(src string) ([]string, error) {
	instrs, err := finalStage(src)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, in := range instrs {
		f := strings.Fields(in[1])
		if in[0] == "COPY" && len(f) == 3 && f[0] == "--from=build" {
			out = append(out, f[2])
		}
	}
	slices.Sort(out)
	return out, nil
}

// parseEnv reads ENV KEY=VALUE ... (unquoted values) or the old ENV KEY VALUE.
func parseEnv(args string, env map[string]string) error {
	fields := strings.Fields(args)
	if len(fields) == 0 {
		return fmt.Errorf("ENV: no variable")
	}
	if !strings.Contains(fields[0], "=") {
		env[fields[0]] = strings.TrimSpace(strings.TrimPrefix(args, fields[0]))
		return nil
	}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" || strings.ContainsAny(v, `"'`) {
			return fmt.Errorf("ENV %s: %q is not KEY=VALUE without quotes", args, f)
		}
		env[k] = v
	}
	return nil
}

// parseHealthcheck reads HEALTHCHECK [--OPTION=VALUE ...] CMD ["..."] with
// Docker's defaults for the options left out.
func parseHealthcheck(args string) (healthcheck, error) {
	h := healthcheck{Interval: 30 * time.Second, Timeout: 30 * time.Second, Retries: 3}
	rest := args
	for strings.HasPrefix(rest, "--") {
		opt, after, _ := strings.Cut(rest, " ")
		rest = strings.TrimSpace(after)
		name, val, _ := strings.Cut(strings.TrimPrefix(opt, "--"), "=")
		var err error
		switch name {
		case "interval":
			h.Interval, err = time.ParseDuration(val)
		case "timeout":
			h.Timeout, err = time.ParseDuration(val)
		case "start-period":
			h.StartPeriod, err = time.ParseDuration(val)
		case "retries":
			h.Retries, err = strconv.Atoi(val)
		default:
			err = fmt.Errorf("unknown option")
		}
		if err != nil {
			return h, fmt.Errorf("HEALTHCHECK %s: %w", opt, err)
		}
	}
	cmd, ok := strings.CutPrefix(rest, "CMD ")
	if !ok {
		return h, fmt.Errorf("HEALTHCHECK %s: no CMD", args)
	}
	var argv []string
	if err := json.Unmarshal([]byte(strings.TrimSpace(cmd)), &argv); err != nil {
		return h, fmt.Errorf("HEALTHCHECK CMD %s: not the exec form [\"...\"]: %w", cmd, err)
	}
	h.Test = append([]string{"CMD"}, argv...)
	return h, nil
}

func TestDockerfileContract(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      imageContract
		wantErr   string
	}{
		{
			name: "final stage only, continued lines, defaults",
			src: "FROM golang AS build\nUSER 0\nENV A=1\n# comment\nFROM scratch\nUSER 1:1\nENV B=2 C=3\nENV D four five\n" +
				"EXPOSE 9090 53/udp\nHEALTHCHECK --interval=10s \\\n  CMD [\"/x\", \"health\"]\nENTRYPOINT [\"/x\"]\nCMD [\"run\"]\nWORKDIR /w\n",
			want: imageContract{Entrypoint: []string{"/x"}, Cmd: []string{"run"}, User: "1:1", WorkingDir: "/w",
				Env: map[string]string{"B": "2", "C": "3", "D": "four five"}, ExposedPorts: []string{"53/udp", "9090/tcp"},
				Healthcheck: healthcheck{Test: []string{"CMD", "/x", "health"}, Interval: 10 * time.Second, Timeout: 30 * time.Second, Retries: 3}},
		},
		{name: "shell form entrypoint", src: "FROM scratch\nENTRYPOINT /x run\n", wantErr: "ENTRYPOINT /x run: not the exec form"},
		{name: "shell form health check", src: "FROM scratch\nHEALTHCHECK CMD /x health\n", wantErr: "HEALTHCHECK CMD /x health: not the exec form"},
		{name: "bad interval", src: "FROM scratch\nHEALTHCHECK --interval=soon CMD [\"/x\"]\n", wantErr: "HEALTHCHECK --interval=soon"},
		{name: "unknown option", src: "FROM scratch\nHEALTHCHECK --every=1s CMD [\"/x\"]\n", wantErr: "--every=1s: unknown option"},
		{name: "quoted env", src: "FROM scratch\nENV A=\"b c\"\n", wantErr: "not KEY=VALUE without quotes"},
		{name: "dangling continuation", src: "FROM scratch\nCMD [\"x\"] \\", wantErr: "continuation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dockerfileContract(tc.src)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestTaskDefinitionsMatchDockerfile: the ECS task definitions run the
// image as the Dockerfile's user, check health with its command, and map
// the port it exposes.
func TestTaskDefinitionsMatchDockerfile(t *testing.T) {
	want, err := dockerfileContract(readFile(t, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"ecs-task-definition.json", "ecs-task-definition-sweep.json"} {
		var td struct {
			ContainerDefinitions []struct {
				User         string `json:"user"`
				PortMappings []struct {
					ContainerPort int    `json:"containerPort"`
					Protocol      string `json:"protocol"`
				} `json:"portMappings"`
				HealthCheck struct {
					Command []string `json:"command"`
				} `json:"healthCheck"`
			} `json:"containerDefinitions"`
		}
		if err := json.Unmarshal([]byte(readFile(t, file)), &td); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, c := range td.ContainerDefinitions {
			if c.User != want.User {
				t.Errorf("%s: user %q, the Dockerfile's USER is %q", file, c.User, want.User)
			}
			if !slices.Equal(c.HealthCheck.Command, want.Healthcheck.Test) {
				t.Errorf("%s: healthCheck.command %q, the Dockerfile's HEALTHCHECK is %q", file, c.HealthCheck.Command, want.Healthcheck.Test)
			}
			for _, p := range c.PortMappings {
				if port := fmt.Sprintf("%d/%s", p.ContainerPort, p.Protocol); !slices.Contains(want.ExposedPorts, port) {
					t.Errorf("%s: port mapping %s is not among the Dockerfile's EXPOSE %v", file, port, want.ExposedPorts)
				}
			}
		}
	}
}
