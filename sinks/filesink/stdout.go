package filesink

import "github.com/ttl-archiver/archiver/sinkurl"

// ParseStdout checks a stdout:// URL (nothing after the scheme but
// parameters; format=envelope|item) and reports whether it asks for the
// plain item format.
func ParseStdout(p *sinkurl.Params) (bool, error) {
	if p.URL.Host != "" || (p.URL.Path != "" && p.URL.Path != "/") {
		return false, p.Fail("", "want stdout:// with nothing after it but parameters")
	}
	format, err := p.OneOf("format", "envelope", "envelope", "item")
	if err != nil {
		return false, err
	}
	return format == "item", p.Done()
}
