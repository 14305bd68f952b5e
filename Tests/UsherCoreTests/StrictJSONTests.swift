import Foundation
import Testing

@testable import UsherCore

/// JSON text is parsed by Foundation, then held to RFC 8259 where Foundation
/// is lenient: trailing commas and member names given twice.
@Suite struct StrictJSONTests {
    private func message(_ text: String) -> String? {
        do throws(JSONSyntaxError) {
            _ = try JSONValue.parse(text)
            return nil
        } catch {
            return error.message
        }
    }

    @Test func trailingCommasAreErrors() {
        #expect(message(#"{"capacity": 1,}"#) == "malformed JSON at line 1, column 15: trailing comma")
        #expect(message("[1, 2 ,\n ]") == "malformed JSON at line 1, column 7: trailing comma")
        #expect(message(#"{"a": [{"b": 1},]}"#)?.contains("trailing comma") == true)
        #expect(message("{\n  \"a\": {\"b\": 2,\n  }\n}") == "malformed JSON at line 2, column 15: trailing comma")
    }

    @Test func duplicateNamesAreErrors() {
        #expect(message(#"{"a": 1, "a": 2}"#) == #"malformed JSON at line 1, column 10: member "a" given twice"#)
        #expect(
            message("{\"q\": {\"x\": 1,\n \"y\": {}, \"x\": 3}}")?.hasPrefix("malformed JSON at line 2, column 11")
                == true)
        // The same name however it is written: an escape, or another normal form.
        #expect(message(#"{"a": 1, "\u0061": 2}"#)?.contains(#"member "a" given twice"#) == true)
        #expect(message(#"{"é": 1, "e\u0301": 2}"#)?.contains("given twice") == true)
        // The same name in different objects is fine.
        #expect(message(#"{"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]}"#) == nil)
    }

    @Test func punctuationInsideStringsIsNotStructure() throws {
        let value = try JSONValue.parse(#"{"k": ",}", "m": "a:b:c", "q": "\",]", "e": "\\", "n": [1, 2]}"#)
        #expect(value["k"] == .string(",}"))
        #expect(value["e"] == .string("\\"))
        #expect(try JSONValue.parse(#""a, ]""#) == .string("a, ]"))
        #expect(try JSONValue.parse("[]") == .array([]))
        #expect(try JSONValue.parse("{}") == .object([]))
    }

    @Test func foundationErrorsGiveLineAndColumn() {
        #expect(message("{\n  \"port\": 80\n  \"host\": 1}") == "malformed JSON at line 3, column 3: invalid value")
        #expect(message("{\"a\": \"é\" x}") == "malformed JSON at line 1, column 11: invalid value")
        #expect(message("{\"a\": ")?.hasPrefix("malformed JSON") == true)
    }

    @Test func textThatIsNotUTF8IsAnError() {
        let utf16 = Data(#"{"a": 1}"#.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] })
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parse(utf16) }
    }
}
