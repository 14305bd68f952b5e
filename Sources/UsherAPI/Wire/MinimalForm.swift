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
    /// Whether the request asked `Prefer: return=minimal`.
    var prefersMinimal: Bool {
        guard let prefer = request.header("prefer") else { return false }
        return prefer.split(separator: ",").contains { preference in
            let token = preference.split(separator: ";").first.map { $0.filter { $0 != " " && $0 != "\t" } } ?? ""
            return token.lowercased() == "return=minimal"
        }
    }

    /// The object answered: encoded, or with `Prefer: return=minimal` the
    /// same status with `Location` and the object's headers and no body.
    func object(_ body: some MinimalForm, status: Int = 200, headers: [(name: String, value: String)] = [])
        -> HTTPResponse
    {
        guard prefersMinimal else { return Reply.encoded(body, status: status, headers: headers) }
        // Every object route is below `/v1/{kind}/{name}`: the resource's path is the first three segments.
        let resource = request.path.split(separator: "/", maxSplits: 3).prefix(3).joined(separator: "/")
        let location = "/" + resource + (body.place.isEmpty ? "" : "/" + body.place)
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
