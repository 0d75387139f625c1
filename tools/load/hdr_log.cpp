// HdrHistogram V2 compressed encoding and interval log (v1.3) I/O for latency_histogram.
// Here, not in src/base: the encoding deflates, and the core library must not need zlib.

#include "hdr_log.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <ctime>
#include <istream>
#include <ostream>

#include <zlib.h>

namespace ringrpc::detail {

namespace {

void require(bool ok, const char* message) {
  if (!ok) throw std::invalid_argument(message);
}

}  // namespace

// ===== V2 encoding =========================================================================

namespace {

constexpr std::uint32_t encoding_cookie_base = 0x1c849303;
constexpr std::uint32_t compressed_cookie_base = 0x1c849304;
// HdrHistogram writers set this bit (word-size nibble); readers mask the whole nibble off.
constexpr std::uint32_t cookie_flags = 0x10;
constexpr std::uint32_t cookie_flag_mask = 0xf0;
constexpr std::size_t header_bytes = 40;
constexpr std::size_t max_leb128_bytes = 9;

void put_be(std::string& out, std::uint64_t v, int bytes) {
  for (int shift = (bytes - 1) * 8; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((v >> shift) & 0xff));
  }
}

std::uint64_t get_be(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

// LEB128 variant capped at 9 bytes: the 9th byte carries the top 8 bits whole.
void put_zigzag(std::string& out, std::int64_t value) {
  std::uint64_t u = (static_cast<std::uint64_t>(value) << 1) ^
                    static_cast<std::uint64_t>(value >> 63);
  for (std::size_t i = 0; i + 1 < max_leb128_bytes; ++i) {
    if (u < 0x80) {
      out.push_back(static_cast<char>(u));
      return;
    }
    out.push_back(static_cast<char>((u & 0x7f) | 0x80));
    u >>= 7;
  }
  out.push_back(static_cast<char>(u));
}

bool get_zigzag(const unsigned char*& p, const unsigned char* end, std::int64_t& value) {
  std::uint64_t u = 0;
  bool done = false;
  for (std::size_t i = 0; i + 1 < max_leb128_bytes && !done; ++i) {
    if (p == end) return false;
    const unsigned b = *p++;
    u |= static_cast<std::uint64_t>(b & 0x7f) << (7 * i);
    done = (b & 0x80) == 0;
  }
  if (!done) {
    if (p == end) return false;
    u |= static_cast<std::uint64_t>(*p++) << 56;
  }
  value = static_cast<std::int64_t>((u >> 1) ^ (~(u & 1) + 1));
  return true;
}

constexpr std::string_view base64_alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (const char c : bytes) {
    acc = ((acc << 8) | static_cast<unsigned char>(c)) & 0xffff;
    for (bits += 8; bits >= 6;) out.push_back(base64_alphabet[(acc >> (bits -= 6)) & 63]);
  }
  if (bits > 0) out.push_back(base64_alphabet[(acc << (6 - bits)) & 63]);
  while (out.size() % 4 != 0) out.push_back('=');
  return out;
}

std::vector<unsigned char> base64_decode(std::string_view text) {
  for (int i = 0; i < 2 && !text.empty() && text.back() == '='; ++i) text.remove_suffix(1);
  if (text.size() % 4 == 1) throw std::invalid_argument("base64: bad length");
  std::vector<unsigned char> out;
  out.reserve(text.size() / 4 * 3 + 2);
  std::uint32_t acc = 0;
  int bits = 0;
  for (const char c : text) {
    const auto pos = base64_alphabet.find(c);
    if (pos == std::string_view::npos) throw std::invalid_argument("base64: invalid character");
    acc = ((acc << 6) | static_cast<std::uint32_t>(pos)) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<unsigned char>(acc >> bits));
    }
  }
  return out;
}

// Pulls exact byte counts out of a zlib stream; the header tells us how much payload follows.
class inflater {
 public:
  inflater(const unsigned char* data, std::size_t size) {
    _stream.next_in = const_cast<unsigned char*>(data);  // zlib's API is not const-correct
    _stream.avail_in = static_cast<uInt>(size);
    if (inflateInit(&_stream) != Z_OK) throw std::runtime_error("zlib: inflateInit failed");
  }
  ~inflater() { inflateEnd(&_stream); }
  inflater(const inflater&) = delete;
  inflater& operator=(const inflater&) = delete;

  void read_exact(unsigned char* out, std::size_t size) {
    _stream.next_out = out;
    _stream.avail_out = static_cast<uInt>(size);
    while (_stream.avail_out != 0) {
      const int rc = inflate(&_stream, Z_NO_FLUSH);
      require(rc == Z_OK || (rc == Z_STREAM_END && _stream.avail_out == 0),
              "histogram encoding: corrupt, or shorter than its header declares");
    }
  }

 private:
  z_stream _stream{};
};

}  // namespace

std::string encode_compressed_base64(const latency_histogram& h) {
  std::size_t limit = 0;  // one past the last non-empty index: trailing zeros are implied
  for (std::size_t i = 0; i < h.counts_length(); ++i) {
    if (h.count_at_index(i) != 0) limit = i + 1;
  }
  std::string payload;
  for (std::size_t i = 0; i < limit;) {
    const std::uint64_t n = h.count_at_index(i);
    if (n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw std::overflow_error("encode_compressed_base64: bucket count exceeds INT64_MAX");
    }
    std::size_t run = 1;
    while (n == 0 && i + run < limit && h.count_at_index(i + run) == 0) ++run;
    // A lone zero costs one byte either way; longer runs collapse to one negative word.
    put_zigzag(payload, run > 1 ? -static_cast<std::int64_t>(run) : static_cast<std::int64_t>(n));
    i += run;
  }
  std::string raw;
  raw.reserve(header_bytes + payload.size());
  put_be(raw, encoding_cookie_base | cookie_flags, 4);
  put_be(raw, payload.size(), 4);
  put_be(raw, 0, 4);  // normalizing index offset: we never shift
  put_be(raw, static_cast<std::uint64_t>(h.significant_digits()), 4);
  put_be(raw, h.lowest_discernible(), 8);
  put_be(raw, h.highest_trackable(), 8);
  put_be(raw, std::bit_cast<std::uint64_t>(1.0), 8);  // integer-to-double conversion ratio
  raw += payload;

  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::string packed(packed_size, '\0');
  // Best compression, as HdrHistogram's log writer uses: these strings live in logs.
  if (compress2(reinterpret_cast<Bytef*>(packed.data()), &packed_size,
                reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()),
                Z_BEST_COMPRESSION) != Z_OK) {
    throw std::runtime_error("encode_compressed_base64: zlib compress2 failed");
  }
  std::string out;
  put_be(out, compressed_cookie_base | cookie_flags, 4);
  put_be(out, packed_size, 4);
  out.append(packed.data(), packed_size);
  return base64_encode(out);
}

latency_histogram decode_compressed_base64(std::string_view text) {
  const std::vector<unsigned char> bytes = base64_decode(text);
  require(bytes.size() >= 8, "histogram encoding: too short");
  require((get_be(bytes.data(), 4) & ~cookie_flag_mask) == compressed_cookie_base,
          "histogram encoding: not a V2 compressed histogram");
  const std::uint64_t packed_size = get_be(bytes.data() + 4, 4);
  require(packed_size <= bytes.size() - 8, "histogram encoding: compressed length exceeds data");
  inflater in(bytes.data() + 8, static_cast<std::size_t>(packed_size));

  std::array<unsigned char, header_bytes> header{};
  in.read_exact(header.data(), header.size());
  require((get_be(header.data(), 4) & ~cookie_flag_mask) == encoding_cookie_base,
          "histogram encoding: not a V2 histogram payload");
  const auto payload_size = static_cast<std::int32_t>(get_be(header.data() + 4, 4));
  const auto normalizing_offset = static_cast<std::int32_t>(get_be(header.data() + 8, 4));
  const auto digits = static_cast<std::int32_t>(get_be(header.data() + 12, 4));
  const auto lowest = static_cast<std::int64_t>(get_be(header.data() + 16, 8));
  const auto highest = static_cast<std::int64_t>(get_be(header.data() + 24, 8));
  require(normalizing_offset == 0, "histogram encoding: shifted histograms are unsupported");
  require(payload_size >= 0 && lowest >= 1 && highest >= 1, "histogram encoding: bad header");
  // Deflate expands at most ~1032:1; bounding the payload first keeps a forged length from
  // making us allocate far more than the input could ever produce.
  require(static_cast<std::uint64_t>(payload_size) <= packed_size * 1032,
          "histogram encoding: declared payload larger than the compressed data allows");
  latency_histogram h(static_cast<std::uint64_t>(lowest), static_cast<std::uint64_t>(highest),
                      digits);
  std::vector<unsigned char> payload(static_cast<std::size_t>(payload_size));
  in.read_exact(payload.data(), payload.size());

  const unsigned char* p = payload.data();
  const unsigned char* const end = p + payload.size();
  std::size_t index = 0;
  while (p != end) {
    std::int64_t word = 0;
    require(get_zigzag(p, end, word), "histogram encoding: truncated word");
    // Negative words are runs of empty buckets; the others one bucket's count.
    const std::uint64_t skip = word < 0 ? static_cast<std::uint64_t>(-(word + 1)) + 1 : 1;
    require(skip <= h.counts_length() - index, "histogram encoding: counts run past the layout");
    if (word > 0) h.add_at_index(index, static_cast<std::uint64_t>(word));
    index += static_cast<std::size_t>(skip);
  }
  return h;
}

// ===== interval log ========================================================================

namespace {

std::string fixed3(double v) {
  std::array<char, 400> buf{};  // fits any finite double in fixed notation
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::fixed, 3);
  return std::string(buf.data(), r.ptr);
}

bool parse_double(std::string_view s, double& out) {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc{} && r.ptr == s.data() + s.size();
}

}  // namespace

interval_log_writer::interval_log_writer(std::ostream& out, double max_value_unit_ratio)
    : _out(&out), _max_value_unit_ratio(max_value_unit_ratio) {}

void interval_log_writer::write_header(double start_epoch_s) {
  write_format_version();
  write_start_time(start_epoch_s);
  write_base_time(start_epoch_s);
  write_legend();
}

void interval_log_writer::write_format_version() {
  *_out << "#[Histogram log format version 1.3]\n";
}

void interval_log_writer::write_start_time(double epoch_s) {
  const auto seconds = static_cast<std::time_t>(std::floor(epoch_s));
  std::tm utc{};
  std::array<char, 32> when{};
  if (gmtime_r(&seconds, &utc) == nullptr ||
      std::strftime(when.data(), when.size(), "%Y-%m-%dT%H:%M:%SZ", &utc) == 0) {
    when[0] = '\0';
  }
  *_out << "#[StartTime: " << fixed3(epoch_s) << " (seconds since epoch), " << when.data() << "]\n";
}

void interval_log_writer::write_base_time(double epoch_s) {
  *_out << "#[BaseTime: " << fixed3(epoch_s) << " (seconds since epoch)]\n";
}

void interval_log_writer::write_comment(std::string_view text) {
  require(text.find_first_of("\r\n") == std::string_view::npos,
          "interval_log_writer: comment contains a line break");
  *_out << '#' << text << '\n';
}

void interval_log_writer::write_legend() {
  *_out << "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\","
           "\"Interval_Compressed_Histogram\"\n";
}

void interval_log_writer::write_interval(double start_s, double interval_s,
                                         const latency_histogram& histogram,
                                         std::string_view tag) {
  require(tag.find_first_of(", \t\r\n") == std::string_view::npos,
          "interval_log_writer: tag contains ',' or whitespace");
  const std::string encoded = encode_compressed_base64(histogram);
  std::string line;
  if (!tag.empty()) line.append("Tag=").append(tag).push_back(',');
  line.append(fixed3(start_s)).push_back(',');
  line.append(fixed3(interval_s)).push_back(',');
  line.append(fixed3(static_cast<double>(histogram.max()) / _max_value_unit_ratio)).push_back(',');
  line.append(encoded).push_back('\n');
  *_out << line;
}

interval_log_error::interval_log_error(std::size_t line, const std::string& message)
    : std::runtime_error("interval log line " + std::to_string(line) + ": " + message),
      _line(line) {}

interval_log_reader::interval_log_reader(std::istream& in) : _in(&in) {}

std::optional<log_interval> interval_log_reader::next() {
  std::string text;
  while (std::getline(*_in, text)) {
    ++_line_no;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    std::string_view line = text;
    if (line.empty()) continue;

    std::optional<double>* header_time = nullptr;
    std::string_view number;
    if (line.starts_with("#[StartTime: ")) {
      header_time = &_start_time_s;
      number = line.substr(13);
    } else if (line.starts_with("#[BaseTime: ")) {
      header_time = &_base_time_s;
      number = line.substr(12);
    }
    if (header_time != nullptr) {
      number = number.substr(0, number.find_first_of(" ]"));
      double seconds = 0;
      if (!parse_double(number, seconds)) {
        throw interval_log_error(_line_no, "bad time in header: '" + std::string(number) + "'");
      }
      *header_time = seconds;
      continue;
    }
    if (line.front() == '#' || line.starts_with("\"StartTimestamp\"")) continue;

    std::string tag;
    if (line.starts_with("Tag=")) {
      const auto comma = line.find(',');
      if (comma == std::string_view::npos) {
        throw interval_log_error(_line_no, "Tag= without fields");
      }
      tag = std::string(line.substr(4, comma - 4));
      line.remove_prefix(comma + 1);
    }
    const auto commas = static_cast<std::size_t>(std::count(line.begin(), line.end(), ','));
    if (commas != 3) {
      throw interval_log_error(
          _line_no, "expected 4 comma-separated fields, got " + std::to_string(commas + 1));
    }
    std::array<std::string_view, 4> fields;
    for (auto& field : fields) {
      field = line.substr(0, line.find(','));
      line.remove_prefix(std::min(line.size(), field.size() + 1));
    }
    const std::array<const char*, 3> names{"start timestamp", "interval length", "interval max"};
    std::array<double, 3> numbers{};
    for (std::size_t i = 0; i < numbers.size(); ++i) {
      if (!parse_double(fields[i], numbers[i])) {
        throw interval_log_error(_line_no, std::string("bad ") + names[i] + ": '" +
                                               std::string(fields[i]) + "'");
      }
    }
    try {
      return log_interval{std::move(tag), numbers[0], numbers[1], numbers[2],
                          decode_compressed_base64(fields[3])};
    } catch (const std::exception& e) {
      throw interval_log_error(_line_no, std::string("bad histogram: ") + e.what());
    }
  }
  if (_in->bad()) throw interval_log_error(_line_no + 1, "read error");
  return std::nullopt;
}

std::vector<log_interval> interval_log_reader::read_all() {
  std::vector<log_interval> all;
  while (auto interval = next()) all.push_back(std::move(*interval));
  return all;
}

}  // namespace ringrpc::detail
