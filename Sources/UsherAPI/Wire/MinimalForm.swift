import HTTPServer
import UsherCore

/// An object answer that `Prefer: return=minimal` (RFC 7240) replaces with
/// headers: what a client needs to act on, without a body to encode. The
/// headers are listed in docs/api.md ("Minimal answers").
protocol MinimalForm: Encodable {
    /// Where the object is read, below its resource's path (`visitors/v1`);
    /// empty for the resource itself.
    var place: String { get }
    /// The headers the body stands for.
    var minimalHeaders: [(name: String, value: String)] { get }
}

/// Header names of minimal answers.
enum MinimalHeader {
    static let status = "Usher-Status"
    static let fence = "Usher-Fence"
    static let position = "Usher-Position"
    static let element = "Usher-Element"
    static let state = "Usher-State"

    /// `status`, then `fence` and `position` where there is one.
    static func turn(_ status: String, fence: Int64?, position: Int?) -> [(name: String, value: String)] {
        var headers = [(name: Self.status, value: status)]
        if let fence { headers.append((Self.fence, String(fence))) }
        if let position { headers.append((Self.position, String(position))) }
        return headers
    }
}

extension Call {
    private static let returnMinimal = Array("return=minimal".utf8)

    /// Whether the request asked `Prefer: return=minimal`: one of its
    /// comma-separated preferences, before any `;` parameter, spaces and tabs
    /// left out, is `return=minimal` in any case. Read on the bytes.
    var prefersMinimal: Bool {
        guard var prefer = request.header("prefer") else { return false }
        let wanted = Self.returnMinimal
        return prefer.withUTF8 { bytes in
            var matched = 0  // bytes of `wanted` matched so far in this preference; -1: not it
            var inParameters = false
            for byte in bytes {
                switch byte {
                case UInt8(ascii: ","):
                    if matched == wanted.count { return true }
                    matched = 0
                    inParameters = false
                case UInt8(ascii: ";"): inParameters = true
                case UInt8(ascii: " "), UInt8(ascii: "\t"): continue
                default:
                    guard !inParameters, matched >= 0 else { continue }
                    let lower = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
                    if matched < wanted.count, wanted[matched] == lower { matched += 1 } else { matched = -1 }
                }
            }
            return matched == wanted.count
        }
    }

    /// The object answered: encoded, or with `Prefer: return=minimal` the
    /// same status with `Location` and the object's headers and no body.
    func object(_ body: some MinimalForm, status: Int = 200, headers: [(name: String, value: String)] = [])
        -> HTTPResponse
    {
        guard prefersMinimal else { return Reply.encoded(body, status: status, headers: headers) }
        // Every object route is below `/v1/{kind}/{name}`: the resource's path is the first three segments.
        let path = request.path.utf8
        var slashes = 0
        let end = path.firstIndex { byte in
            if byte == UInt8(ascii: "/") { slashes += 1 }
            return slashes == 4
        }
        let resource = String(request.path[..<(end ?? path.endIndex)])
        let location = body.place.isEmpty ? resource : resource + "/" + body.place
        return HTTPResponse(
            status: status,
            headers: Reply.cacheRule(headers) + [("Preference-Applied", "return=minimal"), ("Location", location)]
                + body.minimalHeaders + headers)
    }
}

extension VisitorBody: MinimalForm {
    var place: String { "visitors/" + view.id }
    var minimalHeaders: [(name: String, value: String)] {
        MinimalHeader.turn(
            view.status.rawValue, fence: view.fence, position: view.status == .waiting ? view.position : nil)
    }
}

extension WindowItemBody: MinimalForm {
    var place: String { "items/" + item.id }
    var minimalHeaders: [(name: String, value: String)] {
        MinimalHeader.turn(item.status.rawValue, fence: item.fence, position: item.position)
    }
}

extension DismissalBody: MinimalForm {
    var place: String { "items/" + dismissal.dismissed.id }
    var minimalHeaders: [(name: String, value: String)] {
        let dismissed = dismissal.dismissed
        return MinimalHeader.turn(dismissed.status.rawValue, fence: dismissed.fence, position: nil)
    }
}

extension LeaseReplyBody: MinimalForm {
    var place: String { "leases/" + lease.id }
    var minimalHeaders: [(name: String, value: String)] {
        var headers = MinimalHeader.turn(lease.status.rawValue, fence: lease.fence, position: nil)
        if let element = lease.element { headers.append((MinimalHeader.element, element)) }
        return headers
    }
}

extension PipelineItemBody: MinimalForm {
    var place: String { "items/" + item.id }
    var minimalHeaders: [(name: String, value: String)] {
        MinimalHeader.turn(item.status.rawValue, fence: item.fence, position: nil)
    }
}

extension TransitionResultBody: MinimalForm {
    var place: String { "" }
    var minimalHeaders: [(name: String, value: String)] { [(MinimalHeader.state, result.state)] }
}
