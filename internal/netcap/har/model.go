package har

import (
	"encoding/base64"
	"fmt"
	"time"
)

// Version is the HAR version dal writes and reads.
const Version = "1.2"

// Format is the version of dal's own data in the "_dal" fields.
const Format = 1

// Redacted replaces every secret value.
const Redacted = "[REDACTED]"

// Log is a HAR log. The file is {"log": Log}.
type Log struct {
	Version string   `json:"version"`
	Creator Creator  `json:"creator"`
	Browser *Creator `json:"browser,omitempty"`
	Entries []Entry  `json:"entries"`
	Comment string   `json:"comment,omitempty"`
	Dal     *LogDal  `json:"_dal,omitempty"`
}

// NewLog returns a log of entries as dal writes it, with creator "dal"
// version creatorVersion. It keeps entries (nil: none).
func NewLog(entries []Entry, creatorVersion string) *Log {
	if entries == nil {
		entries = []Entry{}
	}
	return &Log{
		Version: Version,
		Creator: Creator{Name: "dal", Version: creatorVersion},
		Entries: entries,
		Dal:     &LogDal{Format: Format},
	}
}

// LogDal is dal's data on the log.
type LogDal struct {
	Format int `json:"format"`
	// KeyHeaders are the headers the entries' keys include (the
	// keyHeaders of [FromExchange]); replay uses the same.
	KeyHeaders []string `json:"key_headers,omitempty"`
}

// Creator names the application that wrote the log.
type Creator struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Comment string `json:"comment,omitempty"`
}

// Entry is one exchange.
type Entry struct {
	Pageref         string        `json:"pageref,omitempty"`
	StartedDateTime time.Time     `json:"startedDateTime"`
	Time            float64       `json:"time"` // ms, send + wait + receive
	Request         EntryRequest  `json:"request"`
	Response        EntryResponse `json:"response"`
	Cache           Cache         `json:"cache"`
	Timings         Timings       `json:"timings"`
	ServerIPAddress string        `json:"serverIPAddress,omitempty"`
	Connection      string        `json:"connection,omitempty"`
	Comment         string        `json:"comment,omitempty"`
	Dal             *EntryDal     `json:"_dal,omitempty"`
}

// EntryRequest is an entry's request, redacted.
type EntryRequest struct {
	Method      string      `json:"method"`
	URL         string      `json:"url"`
	HTTPVersion string      `json:"httpVersion"`
	Cookies     []Cookie    `json:"cookies"`
	Headers     []NameValue `json:"headers"`
	QueryString []NameValue `json:"queryString"`
	PostData    *PostData   `json:"postData,omitempty"`
	HeadersSize int64       `json:"headersSize"` // -1: not known
	BodySize    int64       `json:"bodySize"`
	Comment     string      `json:"comment,omitempty"`
}

// EntryResponse is an entry's response, redacted. A failed exchange has
// status 0 and empty content.
type EntryResponse struct {
	Status      int         `json:"status"`
	StatusText  string      `json:"statusText"`
	HTTPVersion string      `json:"httpVersion"`
	Cookies     []Cookie    `json:"cookies"`
	Headers     []NameValue `json:"headers"`
	Content     Content     `json:"content"`
	RedirectURL string      `json:"redirectURL"`
	HeadersSize int64       `json:"headersSize"`
	BodySize    int64       `json:"bodySize"`
	Comment     string      `json:"comment,omitempty"`
}

// Cookie is a cookie sent or set; dal stores its value redacted.
type Cookie struct {
	Name     string `json:"name"`
	Value    string `json:"value"`
	Path     string `json:"path,omitempty"`
	Domain   string `json:"domain,omitempty"`
	Expires  string `json:"expires,omitempty"` // ISO 8601
	HTTPOnly bool   `json:"httpOnly,omitempty"`
	Secure   bool   `json:"secure,omitempty"`
	Comment  string `json:"comment,omitempty"`
}

// NameValue is a header or a query parameter.
type NameValue struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Comment string `json:"comment,omitempty"`
}

// PostData is a request body, content-decoded.
type PostData struct {
	MimeType string  `json:"mimeType"`
	Params   []Param `json:"params"`
	Text     string  `json:"text"`
	// Encoding is "base64" when Text is base64 (the body is not UTF-8).
	Encoding string `json:"_encoding,omitempty"`
	Comment  string `json:"comment,omitempty"`
}

// Param is a posted parameter of a form body.
type Param struct {
	Name        string `json:"name"`
	Value       string `json:"value,omitempty"`
	FileName    string `json:"fileName,omitempty"`
	ContentType string `json:"contentType,omitempty"`
	Comment     string `json:"comment,omitempty"`
}

// Content is a response body, content-decoded.
type Content struct {
	Size        int64  `json:"size"`
	Compression int64  `json:"compression,omitempty"`
	MimeType    string `json:"mimeType"`
	Text        string `json:"text,omitempty"`
	// Encoding is "base64" when Text is base64 (the body is not UTF-8).
	Encoding string `json:"encoding,omitempty"`
	Comment  string `json:"comment,omitempty"`
}

// Cache is HAR's cache object; dal leaves it empty.
type Cache struct {
	Comment string `json:"comment,omitempty"`
}

// Timings in milliseconds. Send, Wait and Receive are >= 0; the others
// are -1 when not known.
type Timings struct {
	Blocked float64 `json:"blocked"`
	DNS     float64 `json:"dns"`
	Connect float64 `json:"connect"`
	Send    float64 `json:"send"`
	Wait    float64 `json:"wait"`
	Receive float64 `json:"receive"`
	SSL     float64 `json:"ssl"`
	Comment string  `json:"comment,omitempty"`
}

// EntryDal is dal's data on an entry; see the package documentation.
type EntryDal struct {
	Key      string `json:"key"`
	Seq      int    `json:"seq"`
	Via      string `json:"via,omitempty"`
	Streamed bool   `json:"streamed,omitempty"`
	Encoded  bool   `json:"encoded,omitempty"`
	// Wire is the response body as received, base64, when content.text
	// is it decoded (Content-Encoding removed): what replay sends. Absent
	// when the body was not decoded, or when the decoded body held a
	// secret (then replay sends the redacted text, decoded).
	Wire       string     `json:"wire,omitempty"`
	Chunks     []DalChunk `json:"chunks,omitempty"`
	Redactions []string   `json:"redactions,omitempty"`
	Error      string     `json:"error,omitempty"`
	ServerAddr string     `json:"server_addr,omitempty"`
	// Destination is the server the request went to, "host:port" (see
	// [Exchange.Dest]); RemoteAddr the address connected to.
	Destination string `json:"destination,omitempty"`
	RemoteAddr  string `json:"remote_addr,omitempty"`
	// ClientClosed: the client closed its connection before the whole
	// response had reached it (not a failure).
	ClientClosed *DalClientClose `json:"client_closed,omitempty"`
	// Refused is the address dal refused to connect to; the response is
	// dal's own 403.
	Refused string `json:"refused,omitempty"`
	// Answered names who answered in dal's place ("policy",
	// "strict-llm"); the response is that answer.
	Answered string `json:"answered,omitempty"`
}

// DalClientClose is [ClientClose] in network.har.
type DalClientClose struct {
	Bytes     int64 `json:"bytes"`
	Chunks    int   `json:"chunks"`
	Read      bool  `json:"read,omitempty"`
	Truncated bool  `json:"truncated,omitempty"`
}

// DalChunk is one recorded piece of a streamed response body, decoded.
type DalChunk struct {
	AtMs     float64 `json:"at_ms"`
	Text     string  `json:"text"`
	Encoding string  `json:"encoding,omitempty"` // "base64" or ""
	// Wire is the piece as received, base64, when Text is it decoded
	// (see [EntryDal.Wire]).
	Wire string `json:"wire,omitempty"`
}

// Bytes returns the request body.
func (p *PostData) Bytes() ([]byte, error) {
	return decodeText(p.Text, p.Encoding)
}

// Bytes returns the response body.
func (c *Content) Bytes() ([]byte, error) {
	return decodeText(c.Text, c.Encoding)
}

// WireBytes returns the chunk's piece as received, nil when not stored.
func (c *DalChunk) WireBytes() ([]byte, error) {
	return decodeWire(c.Wire)
}

// WireBytes returns the response body as received, nil when not stored.
func (d *EntryDal) WireBytes() ([]byte, error) {
	return decodeWire(d.Wire)
}

func decodeWire(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("base64 wire bytes: %w", err)
	}
	return b, nil
}

// Bytes returns the chunk's body piece.
func (c *DalChunk) Bytes() ([]byte, error) {
	return decodeText(c.Text, c.Encoding)
}

// RequestBody returns the entry's request body, nil when it had none.
func (e *Entry) RequestBody() ([]byte, error) {
	if e.Request.PostData == nil {
		return nil, nil
	}
	return e.Request.PostData.Bytes()
}

// ResponseBody returns the entry's response body.
func (e *Entry) ResponseBody() ([]byte, error) {
	return e.Response.Content.Bytes()
}

// Seq is the entry's _dal.seq, -1 without _dal.
func (e *Entry) Seq() int {
	if e.Dal == nil {
		return -1
	}
	return e.Dal.Seq
}

func decodeText(text, encoding string) ([]byte, error) {
	switch encoding {
	case "":
		return []byte(text), nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			return nil, fmt.Errorf("base64 text: %w", err)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("text encoding %q is not base64", encoding)
	}
}

// encodeText stores b as text when it is UTF-8, else as base64.
func encodeText(b []byte) (text, encoding string) {
	if isUTF8(b) {
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}
