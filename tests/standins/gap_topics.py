"""Questions the example docs do not answer, in three topics of ten phrasings each, and questions
they do answer: the audit trail `fieldguide gaps` is tested on (tests/test_gaps.py) and measured on
(bench/gaps.py)."""

TOPICS = {
    "crypto": [
        "Can I pay with Bitcoin?",
        "Do you accept cryptocurrency for invoices?",
        "Is paying in Ethereum supported?",
        "Can we settle our bill using crypto?",
        "Any plans to take USDC stablecoin payments?",
        "Does Tidewater accept Bitcoin as a payment method?",
        "crypto payment option for the Team plan?",
        "Can I use a crypto wallet to pay my subscription?",
        "Will you support paying invoices in BTC?",
        "Is cryptocurrency an accepted way to pay?",
    ],
    "terraform": [
        "Is there a Terraform provider for Tidewater?",
        "How do I manage webhook endpoints with Terraform?",
        "Can I configure Tidewater using infrastructure as code?",
        "Do you have a Pulumi or Terraform integration?",
        "terraform module for endpoints?",
        "How to provision Tidewater resources from Terraform?",
        "Is there an official Terraform plugin?",
        "Can our Terraform HCL configs create Tidewater endpoints?",
        "Any IaC support, like a Terraform provider?",
        "Manage Tidewater config declaratively with Terraform?",
    ],
    "hipaa": [
        "Is Tidewater HIPAA compliant?",
        "Will you sign a BAA for HIPAA?",
        "Can we send protected health information (PHI) under HIPAA?",
        "Do you support HIPAA workloads?",
        "Is Tidewater suitable for healthcare data under HIPAA?",
        "Can I get a HIPAA business associate agreement?",
        "HIPAA compliance status?",
        "Are you certified for handling PHI and HIPAA data?",
        "Does the Enterprise plan include HIPAA compliance?",
        "Can a hospital use Tidewater for patient health records?",
    ],
}
ANSWERED = [
    "How many times is a failed webhook retried?",
    "What does error TW-1429 mean?",
    "How much does the Team plan cost?",
    "How do I rotate my API key?",
    "What is the maximum page size when listing deliveries?",
    "How do I verify a webhook signature?",
    "Can I replay events from the last two hours?",
    "How are refunds handled?",
    "Which Python package is the official SDK?",
    "How long is an OAuth access token valid?",
    "Can we log in to the dashboard with Okta?",
    "How do I only receive invoice events on one endpoint?",
]
